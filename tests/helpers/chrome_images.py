"""A shared window chrome drawn in the tests (one viewer window around different photos)."""

from __future__ import annotations

from helpers.overlay_images import fitted
from PIL import Image, ImageDraw, ImageFont


def window_chrome(photo: Image.Image) -> Image.Image:
    """``photo`` in a viewer window: dark title bar, menu bar, a side list, a status bar."""
    w, h = 400, 300
    side, title, menu, status = 130, 30, 26, 22
    out = Image.new("RGB", (w + side + 12, h + title + menu + status + 12), (232, 233, 238))
    draw = ImageDraw.Draw(out)
    font = ImageFont.load_default(size=14)
    draw.rectangle((0, 0, out.width, title), fill=(40, 44, 58))
    draw.text((70, 7), "Viewer - IMG_2231.jpg", font=font, fill=(235, 235, 235))
    for k, label in enumerate(("File", "Edit", "Go", "Tools")):
        draw.text((8 + 56 * k, title + 5), label, font=font, fill=(15, 15, 15))
    for k in range(7):
        y = title + menu + 10 + 36 * k
        draw.rectangle((8, y, 30, y + 22), fill=(70 + 20 * k, 110, 190 - 15 * k))
        draw.text((38, y + 3), f"folder {k}", font=font, fill=(30, 30, 30))
    draw.text((8, out.height - status + 3), "1 of 240  100%", font=font, fill=(30, 30, 30))
    out.paste(fitted(photo), (side + 6, title + menu + 6))
    return out
