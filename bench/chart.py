"""The benchmark's bar chart: median latency of each engine on each model, one
panel per batch size, on a log scale (models differ by 100x). Both suites use
it; a case that failed gets a cross at the panel's foot."""
from report import Results, median_seconds

COLORS = {
    "kiln": "#d62728",
    "onnxruntime": "#1f77b4",
    "openvino": "#9467bd",
    "torch": "#ff7f0e",
    "torch_compile": "#2ca02c",
    # The quantized suite: Kiln in reds and browns, the other engines' int8 in their own colours.
    "kiln_int8": "#8c1515",
    "kiln_qdq": "#e377c2",
    "kiln_fp16": "#ff9896",
    "kiln_bf16": "#c49c94",
    "onnxruntime_int8": "#1f77b4",
    "openvino_int8": "#9467bd",
    "torch_int8": "#2ca02c",
    # The tf suite: Kiln red as everywhere, TensorFlow in oranges, OpenVINO its purple.
    "kiln_tf": "#d62728",
    "tensorflow": "#ff7f0e",
    "tensorflow_xla": "#bcbd22",
    "openvino_tf": "#9467bd",
}


def write_chart(doc, titles, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = Results(doc, titles)
    batches = [b for b in r.batches if any(m for m, bb in r.rows() if bb == b)]
    if not batches:
        return False
    fig, axes = plt.subplots(len(batches), 1, figsize=(11, 3.6 * len(batches)), squeeze=False)
    width = 0.8 / max(1, len(r.engines))
    for ax, batch in zip(axes[:, 0], batches):
        models = [m for m, b in r.rows() if b == batch]
        for i, engine in enumerate(r.engines):
            xs, ys, failed = [], [], []
            for j, model in enumerate(models):
                case = r.case(model, batch, engine)
                t = median_seconds(case) if case else None
                x = j + (i - (len(r.engines) - 1) / 2) * width
                if t is not None:
                    xs.append(x)
                    ys.append(t * 1e3)
                elif case is not None:
                    failed.append(x)
            ax.bar(xs, ys, width, label=r.engine_title(engine), color=COLORS.get(engine))
            for x in failed:  # a failed engine gets a cross at the foot of the panel
                ax.text(x, 0.02, "x", ha="center", va="bottom", color=COLORS.get(engine), fontsize=9,
                        transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([r.model_title(m).split(" (")[0] for m in models])
        ax.set_ylabel("median latency (ms, log)")
        ax.set_title(f"batch {batch}, {r.settings['threads']} threads (lower is better)")
        ax.grid(axis="y", which="both", alpha=0.3)
    # Legend entries made here, not taken from the bars: an engine with no bar (failed everywhere)
    # still gets its colour. Up to 5 in a row (the float suite), else two rows.
    from matplotlib.patches import Patch

    handles = [Patch(color=COLORS.get(e), label=r.engine_title(e)) for e in r.engines]
    columns = len(handles) if len(handles) <= 5 else -(-len(handles) // 2)
    legend_rows = -(-len(handles) // columns)
    fig.legend(handles=handles, ncol=columns, fontsize=9, loc="upper center")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 * legend_rows / (3.6 * len(batches))))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
