"""Reference unlearning of a transformers causal LM, and relearning: what verification is tested against.

Not a product feature: verification (the ``verification`` audit kind) must tell a model that forgot a forget set
(:func:`workers.unlearning.reference.unlearn`) from one that did not (:func:`workers.unlearning.reference.fake_unlearn`)
and notice a forgotten fact that a few steps of fine-tuning bring back (:func:`workers.unlearning.relearn.relearn`).
Method, hyper-parameters and measured rates: docs/verification.md, "Reference unlearning and the paired test";
``python -m benchmarks.unlearning`` measures them on ``groundtruth-tiny``.
"""

from workers.unlearning.reference import fake_unlearn, forget_examples, unlearn
from workers.unlearning.relearn import relearn

__all__ = ["fake_unlearn", "forget_examples", "relearn", "unlearn"]
