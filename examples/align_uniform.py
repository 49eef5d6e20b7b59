"""A training method of your own, outside the package: alignment and uniformity (Wang & Isola, 2020) as a loss.

Train it with the course's trainer, without editing the package:

    contrastive-nb train --method examples/align_uniform.py:AlignUniform --options.weight 0.5

`--method examples/align_uniform.py:AlignUniform --help` lists its options. The run's checkpoints record this file's
path and the SHA-256 of its content: resuming after the file was edited is refused.
"""
import dataclasses

from contrastive_nb.methods import MethodOptions, TwoViewMethod
from contrastive_nb.similarity import alignment, uniformity


@dataclasses.dataclass(frozen=True)
class AlignUniformOptions(MethodOptions):
    "The method's own settings: `--options.weight`, `--options.t`, or an [options] table."
    weight: float = 1.0 # weight of the uniformity term
    t: float = 2.0 # the uniformity's scale t

    def __post_init__(self):
        if not self.weight >= 0: raise ValueError(f"weight must be at least 0, got {self.weight}")
        if not self.t > 0: raise ValueError(f"t must be positive, got {self.t}")


class AlignUniform(TwoViewMethod):
    "Pull the two views of each source together; spread the batch over the sphere."
    Options = AlignUniformOptions

    def pair_loss(self, z1, z2, batch):
        spread = (uniformity(z1, self.options.t) + uniformity(z2, self.options.t)) / 2
        return alignment(z1, z2) + self.options.weight * spread
