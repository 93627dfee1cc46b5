//! Real tensors for `task: tensor` dumps (filled in by the tensor-compare work).
