"""Served runs whose steps state no batch (no annotations, shapes or python frames): the size classes, the phase
follow and the host-work change signal, on small synthetic inputs and on the real vLLM captures' twins."""

from __future__ import annotations

import numpy as np

from stepscope.analysis.serving.observations import size_classes


def test_size_classes_split_when_every_product_is_longer():
    # synthetic: medians and lower quartiles both a clear gap apart: chunks against decodes
    sizes = np.array([[100.0, 80.0], [30.0, 25.0], [32.0, 26.0], [110.0, 90.0], [31.0, 24.0]])
    assert size_classes(sizes).tolist() == [1, -1, -1, 1, -1]


def test_size_classes_no_claim_when_only_some_products_are_longer():
    # synthetic: as tests/data/captures/vllm/hol_long_prompt on a CPU, a new shape's first products lift two steps'
    # medians tenfold while their lower quartiles stay among the others': no step is called small or big
    sizes = np.array([[960.0, 50.0], [66.0, 46.0], [61.0, 45.0], [69.0, 53.0], [665.0, 49.0], [64.0, 56.0]])
    assert size_classes(sizes).tolist() == [0] * 6
