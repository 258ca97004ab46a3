"""AccShapeProp: records each node's shape and dtype (``tensor_meta``) by
running the graph on sample inputs (torch.fx's ShapeProp)."""
from torch.fx.passes.shape_prop import ShapeProp


class AccShapeProp(ShapeProp):
    pass
