"""
benchmarks/results/speed_ratios.json against BENCHMARKS.md's table "Speed against AllenNLP core":
the same measurements in the same order (machine, what, size, batch, precision, ratio, setting,
date, code, command), so that neither can drift from the other; and scripts/plot_speed_ratios.py,
which draws the JSON for the documentation (docs/speed_ratios.png), runs.
"""
import importlib.util
import json
import re
import sys
from typing import Dict, List, Tuple

import pytest

from tests.helpers import REPO_ROOT

BENCHMARKS = REPO_ROOT / "BENCHMARKS.md"
RATIOS = REPO_ROOT / "benchmarks" / "results" / "speed_ratios.json"
SECTION = "## Speed against AllenNLP core"
COLUMNS = [
    "machine", "what", "size", "batch", "precision", "ratio", "setting", "date", "code", "command"
]

_PATH = REPO_ROOT / "scripts" / "plot_speed_ratios.py"
_SPEC = importlib.util.spec_from_file_location("plot_speed_ratios", _PATH)
plot_speed_ratios = importlib.util.module_from_spec(_SPEC)
sys.modules["plot_speed_ratios"] = plot_speed_ratios
_SPEC.loader.exec_module(plot_speed_ratios)


def _cells(line: str) -> List[str]:
    return [cell.strip() for cell in line.strip()[1:-1].split("|")]


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    following = text.find("\n## ", start + len(heading))
    return text[start : following if following != -1 else len(text)]


def benchmarks_tables(text: str) -> Tuple[List[Dict[str, str]], Dict[str, str]]:
    """The rows of the speed table (as dicts of COLUMNS) and the command of each label (the first
    code span of its row in the table of commands), from the text of BENCHMARKS.md."""
    lines = [line for line in _section(text, SECTION).splitlines() if line.startswith("| ")]
    header = _cells(lines[0])
    assert header == COLUMNS, f"BENCHMARKS.md's speed table has the columns {header}"
    rows = [
        dict(zip(COLUMNS, _cells(line))) for line in lines[1:] if len(_cells(line)) == len(COLUMNS)
    ]
    commands = {}
    for line in lines:
        cells = _cells(line)
        if len(cells) == 2 and re.fullmatch(r"S\d+", cells[0]):
            commands[cells[0]] = re.match(r"`([^`]+)`", cells[1]).group(1)
    return rows, commands


def json_rows(measurements: List[Dict]) -> List[Dict[str, str]]:
    """The JSON's measurements as the table spells them."""
    return [
        {
            "machine": m["machine"],
            "what": m["what"],
            "size": m["size"],
            "batch": m["batch"],
            "precision": m["precision"],
            "ratio": m["ratio_text"],
            "setting": m["setting"],
            "date": m["date"],
            "code": m["code"],
            "command": m["command_label"],
        }
        for m in measurements
    ]


def differences(text: str, measurements: List[Dict]) -> List[str]:
    """Every way the JSON's measurements and BENCHMARKS.md's speed table disagree."""
    rows, commands = benchmarks_tables(text)
    table = [{**row, "setting": row["setting"].replace("**", "")} for row in rows]
    found = []
    if len(table) != len(measurements):
        found.append(f"the table has {len(table)} rows, the JSON {len(measurements)} measurements")
    for index, (row, entry) in enumerate(zip(table, json_rows(measurements))):
        if row != entry:
            changed = {key: (row[key], entry[key]) for key in COLUMNS if row[key] != entry[key]}
            found.append(f"row {index + 1}: table vs JSON {changed}")
    for index, m in enumerate(measurements):
        if float(m["ratio_text"].rstrip("x")) != m["ratio"]:
            found.append(
                f"measurement {index + 1}: ratio {m['ratio']} but ratio_text {m['ratio_text']}"
            )
        if commands.get(m["command_label"]) != m["command"]:
            in_table = commands.get(m["command_label"])
            found.append(
                f"measurement {index + 1}: command {m['command_label']} is {in_table!r} in the table"
            )
        if m["device"] != ("GPU" if m["machine"].startswith("H") else "CPU"):
            found.append(f"measurement {index + 1}: device {m['device']} for {m['machine']}")
    return found


def _measurements() -> List[Dict]:
    return json.loads(RATIOS.read_text(encoding="utf-8"))["measurements"]


def test_the_json_is_the_speed_table_of_benchmarks_md():
    text = BENCHMARKS.read_text(encoding="utf-8")
    measurements = _measurements()
    assert len(measurements) > 30
    assert differences(text, measurements) == []


def test_every_machine_of_the_json_is_described_in_benchmarks_md():
    machines_table = _section(BENCHMARKS.read_text(encoding="utf-8"), "## Machines")
    labels = {_cells(line)[0] for line in machines_table.splitlines() if line.startswith("| ")}
    for m in _measurements():
        assert m["machine"] in labels
        # The CPU's name and vector extensions as describe_run() printed them, where it did.
        described = re.match(r"vm (.*?), 2 cores", m["hardware"])
        if described:
            assert described.group(1) in machines_table


def test_a_drifted_ratio_or_command_is_found():
    text = BENCHMARKS.read_text(encoding="utf-8")
    changed_ratio = _measurements()
    changed_ratio[3]["ratio"], changed_ratio[3]["ratio_text"] = 6.3, "6.30x"
    assert any(line.startswith("row 4:") for line in differences(text, changed_ratio))
    changed_command = _measurements()
    changed_command[0]["command"] += " --rounds 3"
    assert any("command S1" in line for line in differences(text, changed_command))
    fewer = _measurements()[:-1]
    assert any("rows" in line for line in differences(text, fewer))
    edited_table = text.replace("| 1.89x |", "| 1.90x |", 1)
    assert any(line.startswith("row 1:") for line in differences(edited_table, _measurements()))


def numbers_missing_from(page: str, benchmarks: str) -> List[str]:
    """The numbers of ``page`` with a decimal point or a thousands comma (1.89, 22,669) that
    ``benchmarks`` does not contain as a number of its own."""
    numbers = set(re.findall(r"(?<![\w.])\d+(?:,\d{3})*\.\d+|(?<![\w.])\d{1,3}(?:,\d{3})+", page))
    return sorted(
        n for n in numbers if not re.search(rf"(?<![\w.,]){re.escape(n)}(?!\d)", benchmarks)
    )


def test_the_performance_page_copies_its_numbers_from_benchmarks_md():
    page = (REPO_ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    benchmarks = BENCHMARKS.read_text(encoding="utf-8")
    assert numbers_missing_from(page, benchmarks) == []
    # The check sees a number that is not in BENCHMARKS.md, and one that only looks alike.
    assert numbers_missing_from("Small 1.88x, 22,670 tokens/s", benchmarks) == ["1.88", "22,670"]
    assert numbers_missing_from("13.2x", "13.25x") == ["13.2"]


def test_the_script_draws_the_json(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib comes from requirements/figures.txt")
    output = tmp_path / "figures" / "speed_ratios.png"
    assert plot_speed_ratios.main(["--input", str(RATIOS), "--output", str(output)]) == 0
    data = output.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    # One row a measurement and one a machine: the chart grows with the JSON.
    assert width > 800 and height > 20 * len(_measurements())
    assert png_description(data) == plot_speed_ratios.source_digest(RATIOS)
    edited = tmp_path / "edited.json"
    edited.write_bytes(RATIOS.read_bytes().replace(b'"ratio": 1.89,', b'"ratio": 1.9,'))
    assert plot_speed_ratios.source_digest(edited) != png_description(data)


def png_description(data: bytes) -> str:
    """The ``Description`` text chunk of a PNG ('' if it has none)."""
    position = 8
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Description\0"):
            return body[len(b"Description\0") :].decode("latin-1")
        position += 12 + length
    return ""


def test_the_chart_in_docs_was_drawn_from_the_json_as_it_is():
    # Without drawing it again: the chart records the digest of the JSON it was drawn from.
    drawn_from = png_description((REPO_ROOT / "docs" / "speed_ratios.png").read_bytes())
    assert drawn_from == plot_speed_ratios.source_digest(RATIOS), (
        "docs/speed_ratios.png is older than benchmarks/results/speed_ratios.json:"
        " run make figure-speed-ratios"
    )


def test_a_measurement_without_its_ratio_is_one_clear_line(tmp_path, capsys):
    broken = tmp_path / "speed_ratios.json"
    measurements = _measurements()[:2]
    del measurements[1]["ratio_text"]
    broken.write_text(json.dumps({"measurements": measurements}), encoding="utf-8")
    arguments = ["--input", str(broken), "--output", str(tmp_path / "x.png")]
    assert plot_speed_ratios.main(arguments) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "measurement 2 lacks ratio_text" in error
    assert not (tmp_path / "x.png").exists()


def test_short_hardware_keeps_the_cpu_and_its_vector_extensions():
    assert plot_speed_ratios.short_hardware(
        "vm Intel(R) Xeon(R) Processor (x86_64: AVX2 AVX512F AVX512_BF16 AMX; PyTorch kernels AVX512),"
        " 2 cores, torch 2.13.0+cpu"
    ) == "Intel Xeon (x86_64: AVX2 AVX512F AVX512_BF16 AMX), 2 cores"
