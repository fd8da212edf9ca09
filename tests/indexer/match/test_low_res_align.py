"""Dense low-resolution alignment of small pairs (issue 23): a re-scraped 32-px copy, shifted,
zoomed, recoloured and re-encoded, aligns; other parts of the same photo, a periodic texture's
neighbouring tile and flat thumbnails do not."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers.thumb_edits import grid_tile, rescraped, square_cut
from PIL import Image, ImageEnhance, ImageFilter

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.low_res_align import (
    ALIGNED_NEAR,
    CONFIRM_BELOW,
    CONFIRM_FLOOR,
    SEARCH_EVALS,
    SEARCH_STEPS,
    aligned_scores,
    needs_confirmation,
    prepare_query,
)
from splitaudit.indexer.match.nelder_mead import nelder_mead
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS
from splitaudit.indexer.match.verify import verify_scores, verify_thumbnail


@pytest.fixture(scope="module")
def astronaut() -> Image.Image:
    return sample_photo("astronaut")


@pytest.mark.parametrize(
    ("cx", "cy", "dx", "dy", "zoom"),
    [
        (226.2, 383.3, 14.8, 5.6, 1.09),  # 3.7 px right at 32 px: the verifier scores 0.67
        (336.9, 128.7, 10.8, -14.4, 1.14),
        (226.2, 383.3, -12.0, 8.0, 0.8),  # zoomed out
    ],
)
def test_a_shifted_zoomed_recoloured_copy_aligns(
    astronaut: Image.Image, cx: float, cy: float, dx: float, dy: float, zoom: float
) -> None:
    source = verify_thumbnail(square_cut(astronaut, cx, cy, 128))
    copy = rescraped(square_cut(astronaut, cx + dx, cy + dy, 128 / zoom))
    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR


def test_other_parts_of_the_same_photo_do_not_align(astronaut: Image.Image) -> None:
    centres = [(x, y) for x in (100.0, 230.0, 360.0) for y in (100.0, 230.0, 360.0)]
    references = np.stack([verify_thumbnail(square_cut(astronaut, x, y, 128)) for x, y in centres])
    for n, (x, y) in enumerate(centres):
        query = prepare_query(rescraped(square_cut(astronaut, x + 6, y - 6, 128)))
        scores = aligned_scores(query, references)
        assert scores[n] >= ALIGNED_NEAR  # its own tile, for contrast
        assert np.delete(scores, n).max() < ALIGNED_NEAR, (n, scores)


def test_other_parts_of_the_same_photo_do_not_align_the_other_way_round(
    astronaut: Image.Image,
) -> None:
    """The alignment's reverse (a corpus thumbnail onto the test image's, ``small_pairs``) keeps
    sibling tiles apart as the forward one does."""
    centres = [(x, y) for x in (100.0, 230.0, 360.0) for y in (100.0, 230.0, 360.0)]
    tests = np.stack(
        [verify_thumbnail(rescraped(square_cut(astronaut, x + 6, y - 6, 128))) for x, y in centres]
    )
    for n, (x, y) in enumerate(centres):
        reference = prepare_query(verify_thumbnail(square_cut(astronaut, x, y, 128)))
        scores = aligned_scores(reference, tests)
        assert scores[n] >= ALIGNED_NEAR  # its own copy, for contrast
        assert np.delete(scores, n).max() < ALIGNED_NEAR, (n, scores)


def test_a_periodic_textures_neighbouring_tiles_do_not_align() -> None:
    """A 3 x 3 grid of 48-px tiles of a brick wall: each tile is nearly a shifted copy of every
    other (the wall repeats), so only an alignment better than the wall's own repeats counts."""
    brick = sample_photo("brick")
    step, start = 0.8 * brick.width / 3, 0.1 * brick.width
    tiles = [
        square_cut(brick, start + step * (c + 0.5), start + step * (r + 0.5), step, 48)
        for r in range(3)
        for c in range(3)
    ]
    references = np.stack([verify_thumbnail(t) for t in tiles])
    for n, tile in enumerate(tiles):
        scores = aligned_scores(tile, references)
        assert scores[n] >= ALIGNED_NEAR
        assert np.delete(scores, n).max() < ALIGNED_NEAR, (n, scores)


def test_flat_thumbnails_never_align() -> None:
    flat = Image.new("RGB", (32, 32), (120, 130, 200))
    other = verify_thumbnail(Image.new("RGB", (32, 32), (118, 131, 205)))
    assert aligned_scores(flat, other[None])[0] == -1.0


def test_a_refinement_that_lands_off_the_copy_does_not_cost_it(
    astronaut: Image.Image, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ECC fits the raw thumbnails, not the band the score correlates: where its fit is worse
    for the score than the coarse search's (here: forced 2 px off), the coarse warp is kept."""
    from splitaudit.indexer.match import low_res_align

    source = verify_thumbnail(square_cut(astronaut, 226.2, 383.3, 128))
    copy = prepare_query(rescraped(square_cut(astronaut, 226.2 + 10.8, 383.3 - 8.0, 128 / 1.1)))

    def off(reference: object, query: object, warp: np.ndarray) -> np.ndarray:
        moved = warp.copy()
        moved[:, 2] += 2.0
        return moved

    def kept(reference: object, query: object, warp: np.ndarray) -> np.ndarray:
        return warp

    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR  # ECC's own fit
    monkeypatch.setattr(low_res_align, "_refined", kept)
    coarse = aligned_scores(copy, source[None])[0]
    monkeypatch.setattr(low_res_align, "_refined", off)
    assert aligned_scores(copy, source[None])[0] == pytest.approx(coarse)
    assert coarse > 0.5


def test_a_copy_whose_finest_detail_the_rescrape_blurred_still_aligns(
    astronaut: Image.Image,
) -> None:
    """Resampling and JPEG blur a copy's finest band; the pair is scored in a slightly coarser
    band too (``SCORE_SIGMAS``), where the copy's detail survives."""
    source = verify_thumbnail(square_cut(astronaut, 307.2, 307.2, 128))
    blurred = square_cut(astronaut, 317.2, 302.2, 128 / 1.1).filter(ImageFilter.GaussianBlur(0.8))
    buf = io.BytesIO()
    ImageEnhance.Contrast(blurred).enhance(0.85).save(buf, format="JPEG", quality=50)
    buf.seek(0)
    copy = Image.open(buf).convert("RGB")
    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR


@pytest.mark.parametrize(("cx", "cy"), [(226.2, 383.3), (336.9, 128.7)])
def test_a_copy_half_a_pixel_off_keeps_its_finest_detail(
    astronaut: Image.Image, monkeypatch: pytest.MonkeyPatch, cx: float, cy: float
) -> None:
    """The warp resamples the query bicubically (``WARP_INTERPOLATION``): bilinear
    interpolation half a pixel off damps the finest band, which the reference keeps (these
    score 0.97-0.98 bilinear, 0.98-1.0 bicubic: the figures move with OpenCV's build and the
    CPU's vector units, the gap between the two stays above 0.01)."""
    import cv2

    from splitaudit.indexer.match import low_res_align

    source = verify_thumbnail(square_cut(astronaut, cx, cy, 128))
    copy = prepare_query(square_cut(astronaut, cx + 2.0, cy + 2.0, 128))  # 0.5 px at 32 px
    bicubic = float(aligned_scores(copy, source[None], -1.0)[0])
    monkeypatch.setattr(low_res_align, "WARP_INTERPOLATION", cv2.INTER_LINEAR)
    bilinear = float(aligned_scores(copy, source[None], -1.0)[0])
    assert bicubic >= 0.975
    assert bicubic > bilinear + 0.01, (bicubic, bilinear)


@pytest.mark.parametrize(("dx", "dy", "zoom"), [(14.8, 5.6, 1.09), (-12.0, 8.0, 0.8)])
def test_where_ecc_gives_no_fit_the_direct_search_aligns_the_copy(
    astronaut: Image.Image, monkeypatch: pytest.MonkeyPatch, dx: float, dy: float, zoom: float
) -> None:
    """ECC's fit refused (as on a tile ruled by a rim or a horizon, where it drifts to an
    anisotropic warp): the similarity search from the coarse warp still aligns a re-cut copy
    (the coarse warp alone scores these 0.74 and 0.60)."""
    from splitaudit.indexer.match import low_res_align

    def refused(reference: object, query: object, warp: np.ndarray) -> np.ndarray:
        return warp

    monkeypatch.setattr(low_res_align, "_refined", refused)
    source = verify_thumbnail(square_cut(astronaut, 226.2, 383.3, 128))
    copy = rescraped(square_cut(astronaut, 226.2 + dx, 383.3 + dy, 128 / zoom))
    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR


def test_nelder_mead_finds_the_minimum_of_a_bowl() -> None:
    """The search used for pairs ECC leaves unaligned: a 3-parameter bowl from a start 2-4
    steps off, within SEARCH_EVALS warps."""
    target = np.array([1.12, -1.4, 0.9])

    def cost(p: np.ndarray) -> float:
        return float(np.sum(((p - target) / np.array([0.04, 0.5, 0.5])) ** 2))

    start = np.array([1.0, 0.0, 0.0])
    found = nelder_mead(cost, start, np.array(SEARCH_STEPS), SEARCH_EVALS)
    assert cost(found) < 0.05 * cost(start), found


def test_a_grid_of_coins_neighbour_tile_needs_the_alignment_and_fails_it() -> None:
    """The coins photo's centre tile and the tile above it (no pixel in common): the verifier,
    which does not weigh the grid's own repeats, scores them near (0.72-0.74); the alignment,
    which does, does not (0.50), so the confirmation rule takes the pair out. A re-scraped copy
    of the centre tile aligns."""
    source = verify_thumbnail(grid_tile(sample_photo("coins"), 1, 1, 32))
    neighbour = grid_tile(sample_photo("coins"), 1, 0, 64)
    verified = float(verify_scores(neighbour, source[None])[0])
    assert verified >= DEFAULT_THRESHOLDS.verify_score
    th = DEFAULT_THRESHOLDS
    near = th.is_near(36, 0.75, verified, 32)
    assert needs_confirmation(verified, 36, 32, "identity", near, th)
    # Scored exactly down to CONFIRM_FLOOR, as the engine confirms (above it, the default cut
    # gives r itself, an upper bound: 0.75 with bicubic warps).
    assert aligned_scores(neighbour, source[None], CONFIRM_FLOOR)[0] < CONFIRM_FLOOR
    copy = rescraped(grid_tile(sample_photo("coins"), 1, 1, 32, dx=0.1))
    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR


def test_confirmation_is_for_marginal_verifier_only_pairs() -> None:
    th = DEFAULT_THRESHOLDS

    def needs(verify: float, hamming: int, min_side: int, orientation: str) -> bool:
        near = th.is_near(hamming, 0.75, verify, min_side)
        return needs_confirmation(verify, hamming, min_side, orientation, near, th)

    assert not needs(CONFIRM_BELOW, 30, 32, "identity")  # a clear score
    assert not needs(0.75, th.phash_hamming, 32, "identity")  # by its hash
    assert not needs(0.75, 30, 200, "identity")  # not small
    assert not needs(0.75, 30, 32, "rot90")  # the alignment is upright
    assert not needs(0.6, 30, 32, "identity")  # not near anyway
    assert needs(0.75, 30, 32, "mirror")
    assert needs(0.75, 30, 32, "identity")


@pytest.mark.parametrize(("labelled", "flip"), [("mirror", False), ("identity", True)])
def test_a_small_pair_aligns_in_either_orientation_whatever_its_candidate_hash_said(
    astronaut: Image.Image, labelled: str, flip: bool
) -> None:
    """A candidate's orientation beyond the near radius is its nearer candidate hash's alone: a
    zoomed copy labelled mirrored is aligned upright too (and a mirrored one labelled upright
    mirrored), and takes the orientation it aligned in; another tile does not align either way."""
    from splitaudit.indexer.match.pair import Pair
    from splitaudit.indexer.match.phases import PhaseTimes
    from splitaudit.indexer.match.small_pairs import align_small_pairs

    source = verify_thumbnail(square_cut(astronaut, 226.2, 383.3, 128))
    other = verify_thumbnail(square_cut(astronaut, 100.0, 100.0, 128))
    copy = rescraped(square_cut(astronaut, 226.2 + 14.8, 383.3 + 5.6, 128 / 1.09)).resize((48, 48))
    if flip:
        copy = copy.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    th = DEFAULT_THRESHOLDS
    far = th.phash_hamming + 10  # a candidate by its k-NN hash, beyond the near radius

    def pair(item: int) -> Pair:
        return Pair(0, item, hamming=far, orientation=labelled, cosine=0.6, verify=0.3, min_side=48)  # type: ignore[arg-type]

    kept = [pair(1), pair(2)]
    assert not th.is_near(far, 0.6, 0.3, 48)
    align_small_pairs(copy, kept, [source, other], th, PhaseTimes())
    assert kept[0].verify is not None and kept[0].verify >= ALIGNED_NEAR
    assert kept[0].orientation == ("mirror" if flip else "identity")
    assert th.is_near(far, 0.6, kept[0].verify, 48)
    assert kept[1].verify == 0.3 and kept[1].orientation == labelled  # the other tile: unchanged


@pytest.mark.parametrize("flip", [False, True])
def test_a_copy_zoomed_out_past_its_one_feature_aligns_the_other_way_round(flip: bool) -> None:
    """A rocket tile on an empty sky, cut again 0.82x zoomed out and shifted 8 and 14 px at
    32 px: the test image aligned onto its source scores 0.40 (the coarse step matches the
    source's central window, which holds little but sky), the source aligned onto the test
    image 0.84. An audit tries the other way round and finds the copy (mirrored too); a dedup,
    which asks the pair from its other side anyway, does not, nor does a large test image;
    another tile of the photo aligns neither way."""
    from splitaudit.indexer.match.pair import Pair
    from splitaudit.indexer.match.phases import PhaseTimes
    from splitaudit.indexer.match.small_pairs import align_small_pairs

    rocket = sample_photo("rocket")
    source = verify_thumbnail(square_cut(rocket, 230.5, 205.0, 128))
    other = verify_thumbnail(square_cut(rocket, 330.5, 150.0, 128))
    copy = rescraped(square_cut(rocket, 230.5 - 8.3, 205.0 - 13.8, 128 / 0.824))
    if flip:
        copy = copy.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    assert aligned_scores(copy, source[None])[0] < 0.5
    th = DEFAULT_THRESHOLDS
    far = th.phash_hamming + 10

    def pairs() -> list[Pair]:
        return [
            Pair(0, item, hamming=far, orientation="identity", cosine=0.6, verify=0.3, min_side=32)
            for item in (1, 2)
        ]

    kept = pairs()
    align_small_pairs(copy, kept, [source, other], th, PhaseTimes())
    assert kept[0].verify is not None and kept[0].verify >= ALIGNED_NEAR
    assert kept[0].orientation == ("mirror" if flip else "identity")
    assert kept[1].verify == 0.3 and kept[1].orientation == "identity"
    one_way = pairs()
    align_small_pairs(copy, one_way, [source, other], th, PhaseTimes(), both_ways=False)
    assert [p.verify for p in one_way] == [0.3, 0.3]
    # a large test image is aligned its own way only (its pyramid is the sharp one)
    large = copy.resize((128, 128), Image.Resampling.BICUBIC)
    assert aligned_scores(large, source[None])[0] < ALIGNED_NEAR
    back = verify_thumbnail(large)
    back = np.fliplr(back) if flip else back
    assert aligned_scores(prepare_query(source), back[None])[0] >= ALIGNED_NEAR
    large_pairs = pairs()
    align_small_pairs(large, large_pairs, [source, other], th, PhaseTimes())
    assert [p.verify for p in large_pairs] == [0.3, 0.3]


def _star_field(seed: int) -> Image.Image:
    """Faint stars on black around one bright star near the centre (a deep-field tile)."""
    rng = np.random.default_rng(seed)
    pixels = np.full((64, 64, 3), 8.0, np.float32)
    for _ in range(40):
        x, y = rng.integers(0, 64, 2)
        pixels[y, x] += rng.uniform(40, 120)
    y, x = np.mgrid[0:64, 0:64]
    star = np.exp(-((x - 33) ** 2 + (y - 30) ** 2) / (2 * 2.5**2))[..., None]
    pixels += 230 * star * np.array([1.0, 0.8, 0.6])
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _dot_on_blue(seed: int) -> Image.Image:
    """A plain blue ground with one pale dot: sparse, as the verifier weighs it."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:64, 0:64].astype(np.float32)
    dot = np.exp(-((x - 34) ** 2 + (y - 31) ** 2) / (2 * 2.2**2))[..., None]
    pixels = np.array([10.0, 100.0, 200.0]) * (1 - dot) + np.array([150.0, 200.0, 250.0]) * dot
    pixels += rng.normal(0, 0.8, pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def test_a_dot_on_a_plain_ground_does_not_align_into_a_copy_of_a_star_field() -> None:
    """The alignment scores one blob against another blob high (0.99 here); the verifier
    weighs a sparse thumbnail down (``sparse_weight``: 0.47 here), and so does the engine's
    use of the alignment: the pair keeps the verifier's score and is not near."""
    from splitaudit.indexer.match.pair import Pair
    from splitaudit.indexer.match.phases import PhaseTimes
    from splitaudit.indexer.match.small_pairs import align_small_pairs
    from splitaudit.indexer.match.verify import sparse_weight

    field, dot = _star_field(1), verify_thumbnail(_dot_on_blue(2))
    assert aligned_scores(prepare_query(field), dot[None])[0] >= ALIGNED_NEAR  # blob on blob
    assert sparse_weight(dot[None])[0] < 0.6
    verifier = float(verify_scores(field, dot[None])[0])
    th = DEFAULT_THRESHOLDS
    far = th.phash_hamming + 6
    kept = [
        Pair(0, 1, hamming=far, orientation="identity", cosine=0.42, verify=verifier, min_side=64)
    ]
    align_small_pairs(field, kept, [dot], th, PhaseTimes())
    assert kept[0].verify == pytest.approx(verifier)
    assert not th.is_near(far, 0.42, kept[0].verify, 64)


def test_the_two_pixel_self_match_is_each_moves_pearson_r() -> None:
    """``_moved_correlation`` (all 16 moves of the 2-px ring at once) is, move by move, the
    Pearson r of the image and itself rolled, on the overlap of the two masks."""
    from splitaudit.indexer.match.low_res_align import _band_pass, _moved_correlation, _pearson

    rng = np.random.default_rng(7)
    for trial in range(20):
        band = _band_pass(rng.normal(128, 40, (1, 32, 32)).astype(np.float32))[0]
        band += np.roll(band, 2, 1) * (trial % 3)  # some with a strong 2-px repeat
        mask = np.zeros((32, 32), bool)
        right = 30 - int(rng.integers(0, 14))
        mask[2:30, 2:right] = True
        expected = -1.0
        for dx, dy in [(dx, dy) for dy in range(-2, 3) for dx in range(-2, 3)]:
            if max(abs(dx), abs(dy)) != 2:
                continue
            both = mask & np.roll(mask, (dy, dx), (0, 1))
            if both.sum() > 16:
                moved = np.roll(band, (dy, dx), (0, 1))
                expected = max(expected, _pearson(band, moved, both))
        assert _moved_correlation(band, mask) == pytest.approx(expected, abs=1e-12)
    assert _moved_correlation(band, np.zeros((32, 32), bool)) == -1.0


def _search_case(astronaut: Image.Image, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` (query thumbnail, reference band, start) triples of re-cut astronaut tiles."""
    from splitaudit.indexer.match import low_res_align

    rng = np.random.default_rng(7)
    thumbs, bands, starts = [], [], []
    for _ in range(n):
        cx, cy = rng.uniform(150, 360, 2)
        zoom = rng.uniform(0.8, 1.25)
        source = verify_thumbnail(square_cut(astronaut, cx, cy, 128)).astype(np.float32)
        copy = rescraped(square_cut(astronaut, cx + rng.uniform(-12, 12), cy, 128 / zoom))
        thumbs.append(prepare_query(copy).thumb)
        bands.append(low_res_align._band_pass(source[None])[0])
        starts.append([rng.uniform(0.85, 1.15), rng.uniform(-2, 2), rng.uniform(-2, 2)])
    return np.stack(thumbs), np.stack(bands), np.array(starts)


def test_the_search_scores_a_warp_as_opencv_warps_it(astronaut: Image.Image) -> None:
    """The similarity search evaluates many warps at once with two interpolation matrices per
    warp (``_linear_overlaps``); each r is ``_overlap``'s with OpenCV's bilinear warp, and a
    warp left with too little overlap is refused by both. OpenCV 5 samples at the exact
    coordinates, as the matrices do; OpenCV 4 rounds them to 1/32 px (a row or column at the
    image's edge may then count in one and not the other: r moves by a few hundredths, and a
    warp on the edge of ``MIN_OVERLAP`` is refused by one only)."""
    import cv2

    from splitaudit.indexer.match import low_res_align

    thumbs, bands, _ = _search_case(astronaut, 8)
    rng = np.random.default_rng(3)
    warps = np.column_stack(
        [rng.uniform(0.65, 1.5, 400), rng.uniform(-14, 14, 400), rng.uniform(-14, 14, 400)]
    )
    rows = rng.integers(0, len(thumbs), len(warps))
    r = low_res_align._linear_overlaps(thumbs[rows], warps, bands[rows])
    exact = int(cv2.__version__.split(".")[0]) >= 5
    refused = disagreed = 0
    gaps: list[float] = []
    for row, warp, got in zip(rows.tolist(), warps, r.tolist(), strict=True):
        fit = low_res_align._overlap(
            thumbs[row],
            low_res_align._similarity(warp),
            bands[row],
            low_res_align.SEARCH_INTERPOLATION,
        )
        refused += fit is None
        if (fit is None) != bool(np.isnan(got)):
            disagreed += 1
        elif fit is not None:
            gaps.append(abs(got - fit[0]))
    assert disagreed <= (0 if exact else 8)
    if exact:
        assert max(gaps) < 1e-4
    else:
        assert float(np.median(gaps)) < 0.01 and max(gaps) < 0.1
    assert 20 < refused < 380  # both kinds were checked


def test_searches_side_by_side_end_where_each_ends_alone(astronaut: Image.Image) -> None:
    """``_searched`` runs its pairs' Nelder-Mead searches side by side: every pair ends on the
    fit it ends on searched alone; the fit is scored with OpenCV's bicubic warp."""
    from splitaudit.indexer.match import low_res_align

    thumbs, bands, starts = _search_case(astronaut, 12)
    together = low_res_align._searched(thumbs, bands, starts)
    for i in range(len(starts)):
        alone = low_res_align._searched(thumbs[i : i + 1], bands[i : i + 1], starts[i : i + 1])[0]
        assert (alone is None) == (together[i] is None)
        if alone is not None and together[i] is not None:
            assert together[i][0] == alone[0]
            np.testing.assert_array_equal(together[i][1], alone[1])
    found = [fit[0] for fit in together if fit is not None]
    assert len(found) >= 10 and max(found) > 0.9  # the copies were found


def test_alignments_together_score_as_each_alone(astronaut: Image.Image) -> None:
    """``aligned_scores_together`` (a test image's upright, mirrored and confirming
    alignments in one call, their searches side by side) gives each job the scores
    ``aligned_scores`` gives it alone."""
    from splitaudit.indexer.match.low_res_align import aligned_scores_together

    sources = np.stack(
        [
            verify_thumbnail(square_cut(astronaut, x, y, 128))
            for x, y in ((226, 383), (337, 129), (280, 250))
        ]
    )
    copy = prepare_query(rescraped(square_cut(astronaut, 226.2 + 9.0, 383.3 - 6.0, 128 / 1.12)))
    mirror = prepare_query(
        rescraped(square_cut(astronaut, 226.2, 383.3, 128)).transpose(
            Image.Transpose.FLIP_LEFT_RIGHT
        )
    )
    jobs = [(copy, sources, None), (mirror, sources, None), (copy, sources[:2], CONFIRM_FLOOR)]
    together = aligned_scores_together(jobs)
    for (query, references, cut), scores in zip(jobs, together, strict=True):
        np.testing.assert_array_equal(scores, aligned_scores(query, references, cut))
    assert together[0][0] >= ALIGNED_NEAR
    assert aligned_scores_together([]) == []


@pytest.mark.parametrize("flip", [False, True])
def test_a_marginal_verifier_score_is_confirmed_the_other_way_round(flip: bool) -> None:
    """The zoomed-out rocket copy above, near by a verifier score under ``CONFIRM_BELOW`` alone:
    its own alignment onto the source (under 0.5) does not confirm it, but the source aligned
    onto it (0.84) does, as it finds such a pair the verifier left open, and the pair keeps that
    score and orientation. Without the other way round (a dedup) it is unconfirmed; the coins
    photo's neighbouring tile is confirmed neither way."""
    from splitaudit.indexer.match.pair import Pair
    from splitaudit.indexer.match.phases import PhaseTimes
    from splitaudit.indexer.match.small_pairs import align_small_pairs

    rocket = sample_photo("rocket")
    source = verify_thumbnail(square_cut(rocket, 230.5, 205.0, 128))
    copy = rescraped(square_cut(rocket, 230.5 - 8.3, 205.0 - 13.8, 128 / 0.824))
    if flip:
        copy = copy.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    th = DEFAULT_THRESHOLDS
    far, marginal = th.phash_hamming + 10, 0.75
    assert th.is_near(far, 0.6, marginal, 32)
    assert needs_confirmation(marginal, far, 32, "identity", True, th)

    def pair() -> Pair:
        return Pair(
            0, 1, hamming=far, orientation="identity", cosine=0.6, verify=marginal, min_side=32
        )

    kept = [pair()]
    align_small_pairs(copy, kept, [source], th, PhaseTimes())
    assert kept[0].verify is not None and kept[0].verify >= ALIGNED_NEAR
    assert kept[0].unconfirmed_verify is None
    assert kept[0].orientation == ("mirror" if flip else "identity")
    assert th.is_near(far, 0.6, kept[0].verify, 32)

    one_way = [pair()]
    align_small_pairs(copy, one_way, [source], th, PhaseTimes(), both_ways=False)
    assert one_way[0].unconfirmed_verify == marginal
    assert one_way[0].verify is not None and one_way[0].verify < CONFIRM_FLOOR

    coins = verify_thumbnail(grid_tile(sample_photo("coins"), 1, 1, 32))
    neighbour = grid_tile(sample_photo("coins"), 1, 0, 64)
    verified = float(verify_scores(neighbour, coins[None])[0])
    tile = [
        Pair(0, 1, hamming=36, orientation="identity", cosine=0.75, verify=verified, min_side=32)
    ]
    align_small_pairs(neighbour, tile, [coins], th, PhaseTimes())
    assert tile[0].unconfirmed_verify == verified
    assert tile[0].verify is not None and not th.is_near(36, 0.75, tile[0].verify, 32)
