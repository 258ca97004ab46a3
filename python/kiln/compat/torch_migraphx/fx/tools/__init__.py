"""torch_migraphx.fx.tools: MGXSplitter (mgx_splitter)."""
