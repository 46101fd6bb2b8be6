"""The docs' figures have one source: each generated block is what its record (or, for a derived
block such as the coverage tables, its renderer) makes."""

from __future__ import annotations

import shutil

import pytest

from harness.paths import DOCS_DIR
from tools import docs_blocks


def test_every_generated_block_is_what_its_record_renders():
    assert docs_blocks.stale() == [], "a generated block of the docs is not what its record renders"


def test_a_figure_typed_into_a_page_is_stale(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS_DIR, docs)
    page = docs / docs_blocks.PAGES["faults"]
    text = page.read_text(encoding="utf-8")
    shown = docs_blocks.render(docs_blocks.load("faults"))
    assert shown in text
    digit = next(i for i, ch in enumerate(shown) if ch.isdigit() and shown.rfind("\n|", 0, i) > 0)  # in the table
    typed = shown[:digit] + ("1" if shown[digit] != "1" else "2") + shown[digit + 1:]  # one figure typed over
    page.write_text(text.replace(shown, typed, 1), encoding="utf-8")
    assert docs_blocks.stale(docs) == [f"faults: {page} differs from its record; run python -m tools.docs_blocks"]


@pytest.mark.parametrize("name", sorted(docs_blocks.DERIVED))
def test_a_derived_table_edited_by_hand_is_stale(tmp_path, name):
    """The coverage tables are derived blocks: a page that no longer holds what their renderer
    makes from the records (a row edited by hand, or a record changed without rewriting the page)
    is stale."""
    docs = tmp_path / "docs"
    shutil.copytree(DOCS_DIR, docs)
    page = docs / docs_blocks.DERIVED[name][0]
    text = page.read_text(encoding="utf-8")
    shown = docs_blocks.block_text(text, name)
    assert shown == docs_blocks.render_derived(name), f"the page's {name} block is not what its renderer makes"
    last_row = shown.rstrip("\n").rsplit("\n", 1)[1]
    page.write_text(text.replace(last_row, last_row.replace("|", "| edited", 1), 1), encoding="utf-8")
    source = docs_blocks.DERIVED[name][1]
    assert docs_blocks.stale(docs) == [
        f"{name}: {page} differs from what {source} renders; run python -m tools.docs_blocks"]


def test_publish_writes_the_record_and_only_its_block(tmp_path):
    (tmp_path / "data").mkdir()
    page = tmp_path / docs_blocks.PAGES["faults"]
    page.write_text("# Faults\n\nprose\n\n<!-- generated:faults -->\nold\n<!-- /generated:faults -->\n\nafter\n",
                    encoding="utf-8")
    record = docs_blocks.measured("faults", command="python -m tools.bench.faults --docs",
                                  columns=("fault", "time (s)"), rows=[("rank 1 hangs", 8.24)], align="lr",
                                  notes=["1 fault case."])
    assert docs_blocks.publish(record, docs_dir=tmp_path) == page
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Faults\n\nprose\n\n<!-- generated:faults -->\n_Measured ")
    assert "| fault | time (s) |\n|---|---:|\n| rank 1 hangs | 8.24 |\n\n1 fault case.\n<!-- /generated:faults -->\n\nafter\n" in text
    assert docs_blocks.load("faults", tmp_path / "data") == record


def test_a_page_without_the_markers_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("no block here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no <!-- generated:faults --> \.\.\. <!-- /generated:faults --> markers"):
        docs_blocks.write_block(page, "faults", "x\n")
    assert page.read_text(encoding="utf-8") == "no block here\n"


def test_a_sweeps_results_become_the_figures_record(tmp_path):
    from harness.app import aggregate
    from tools import record_figures

    row = {c: None for c in aggregate.COLUMNS}
    row.update(job=1, status="planned", model="deepseek_v32", implementation="reference", split_size=2,
               peak_bytes=16379 * 2**20, uniform_peak_bytes=31222 * 2**20, n_blocks=2978, uniform_n_blocks=1562,
               capacity_gain=1.9066, peak_layers=32.0, limit_layers=32)
    rejected = dict(row, job=2, status="rejected", implementation="xllm_upstream", model="deepseek_v3",
                    peak_bytes=None, capacity_gain=None, message="model.model_type: not upstream's")
    no_uniform = dict(row, job=3, split_size=4, n_blocks=2, uniform_n_blocks=0, capacity_gain=None)  # FEATURE 6: null
    (tmp_path / "results.csv").write_text(aggregate.to_csv([row, rejected, no_uniform]), encoding="utf-8")
    (tmp_path / "results.md").write_text("# Sweep results\n\n`python -m harness -m model=deepseek_v32`\n")
    record = record_figures.sweep_record(tmp_path)
    assert record.columns == aggregate.FIGURES_COLUMNS, "not the app's own figures table"
    assert record.rows[0] == ("deepseek_v32", "reference", "2", "16,379.0", "31,222.0", "2978", "1562", "1.91x",
                              "32", "32", "")
    assert record.rows[1][-1] == "model.model_type: not upstream's" and record.rows[1][3] == ""
    assert record.rows[2][5:8] == ("2", "0", "n/a")  # the CSV's n/a reads back as an undefined gain
    assert record.command.startswith("python -m harness -m model=deepseek_v32 && python -m tools.record_figures"), \
        record.command


def test_a_record_says_when_the_checkout_had_uncommitted_changes(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("1\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    clean = docs_blocks.checkout_commit(tmp_path)
    assert len(clean) == 12 and all(ch in "0123456789abcdef" for ch in clean)
    (tmp_path / "untracked.txt").write_text("not the harness's\n")
    assert docs_blocks.checkout_commit(tmp_path) == clean  # untracked files are not the measured code
    (tmp_path / "a.txt").write_text("2\n")
    assert docs_blocks.checkout_commit(tmp_path) == clean + docs_blocks.DIRTY
