import math

import numpy as np
import pytest

from grpo_lab.analysis import stats


def test_bh_on_known_p_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4/rank: 0.02, 0.02, 0.04, 0.04 (already monotone)
    q = stats.bh([0.01, 0.04, 0.03, 0.005, np.nan])
    assert q[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02]) and math.isnan(q[4])
    # step-up: a larger p can lower a smaller one's q: 0.02*3/1=0.06 > 0.03*3/2=0.045 -> 0.045
    assert stats.bh([0.02, 0.03, 0.9]) == pytest.approx([0.045, 0.045, 0.9])


def test_holm_on_known_p_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x(4,3,2,1): 0.02, 0.03, 0.06, 0.04 -> running max
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])


def test_t_interval_matches_the_t_table():
    lo, hi, p = stats.t_interval([1.0, 1.0], [0.5, 0.0], [4, 4])
    assert lo[0] == pytest.approx(1 - 2.776445 * 0.5) and hi[0] == pytest.approx(1 + 2.776445 * 0.5)
    assert p[0] == pytest.approx(0.11611652)  # 2 * P(T_4 > 2)
    assert np.isnan([lo[1], hi[1], p[1]]).all()  # no variance, no interval


def test_welch_df_reduces_to_n_minus_one_for_one_group():
    assert stats.welch_df([1.0], [2.0], [5]) == pytest.approx(4.0)
    assert stats.welch_df([1.0, -1.0], [1.0, 1.0], [5, 5]) == pytest.approx(8.0)


def test_seeds_needed():
    # t_{n-1}·2/√n < 1 first holds at n = 18 (n = 17: 2.120·2/4.123 = 1.028)
    assert stats.seeds_needed([2.0], [1.0], [1.0]).tolist() == [18.0]
    # beyond the exact grid: (1.96·1/0.1)² = 384.1 -> 385
    assert stats.seeds_needed([1.0], [0.1], [3.0]).tolist() == [385.0]
    assert np.isnan(stats.seeds_needed([np.nan, 100.0], [1.0, 0.01], [1.0, 1.0])).all()


def test_logit_clips_pass_rates():
    out = stats.logit([0.0, 0.5, 1.0])
    assert np.isfinite(out).all() and out[1] == 0.0 and out[0] == pytest.approx(-out[2])
