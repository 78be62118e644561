"""The device catalogue: torch names find their entry, other devices find none, every number
carries its source and agrees with the target data."""
import pytest

from portable import devices
from portable.devices import catalogue, lookup_device
from portable.targets import get_target

# Names as torch.cuda.get_device_name() reports them.
KNOWN = {
    "NVIDIA H100 80GB HBM3": "h100_sxm",
    "NVIDIA H200": "h200",
    "NVIDIA B200": "b200",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "rtx_pro_6000_workstation",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx_pro_6000_server",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI300X VF": "mi300x",
    "AMD Instinct MI355X": "mi355x",
}
# Relatives with other ceilings: they must not borrow a catalogue entry.
UNKNOWN = ["NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GB200",
           "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA GeForce RTX 5090",
           "AMD Instinct MI300A", "AMD Instinct MI325X", "AMD Instinct MI350X", "NVIDIA A100-SXM4-80GB"]


@pytest.mark.parametrize("name, key", KNOWN.items())
def test_torch_names_find_their_entry(name, key):
    assert lookup_device(name)["key"] == key
    assert lookup_device(name.lower())["key"] == key          # case does not matter


@pytest.mark.parametrize("name", UNKNOWN)
def test_other_devices_find_none(name):
    assert lookup_device(name) is None


def test_bad_name_is_refused():
    with pytest.raises(ValueError, match="lookup_device: name must be a device name"):
        lookup_device("")


def test_every_number_has_a_value_and_a_source():
    entries = catalogue()
    assert {e["key"] for e in entries} == set(KNOWN.values())
    for e in entries:
        for field in devices.NUMBER_FIELDS:
            if field == "fp4_tflops" and field not in e:
                continue
            assert e[field]["value"] > 0, (e["key"], field)
            assert len(e[field]["source"]) > 10, (e["key"], field)      # a document title, not a key


def test_catalogue_agrees_with_targets():
    for e in catalogue():
        target = get_target(e["target"])
        assert e["wave_size"]["value"] == target.wave, e["key"]
        assert e["smem_per_sm_kib"]["value"] * 1024 == target.smem_per_sm, e["key"]
        # fp4 exactly where the target has block-scaled FP4 matrix instructions
        assert ("fp4_tflops" in e) == target.has("fp4_e2m1"), e["key"]


def test_dense_peaks_rise_with_narrower_formats():
    for e in catalogue():
        peaks = [devices.number(e, f"{p}_tflops") for p in devices.PEAK_FORMATS]
        present = [p for p in peaks if p]
        assert present == sorted(present), (e["key"], peaks)


def test_lookup_returns_a_copy():
    lookup_device("NVIDIA B200")["memory_tbps"]["value"] = 0
    assert lookup_device("NVIDIA B200")["memory_tbps"]["value"] > 0


def test_bad_entries_are_reported():
    good = {"name": "x", "target": "sm_90a", "name_match": ["x"], "docs": {"sheet": "A datasheet"},
            **{f: {"value": 1, "source": "sheet"} for f in devices.REQUIRED_FIELDS[4:]}}
    devices._resolve("x", good)
    with pytest.raises(ValueError, match=r"\[x\]: memory_tbps.source 'nowhere' is not a key of docs"):
        devices._resolve("x", {**good, "memory_tbps": {"value": 1, "source": "nowhere"}})
    with pytest.raises(ValueError, match=r"\[x\]: missing field 'l2_mib'"):
        devices._resolve("x", {k: v for k, v in good.items() if k != "l2_mib"})
    with pytest.raises(ValueError, match=r"\[x\]: target 'sm_80' is not one of"):
        devices._resolve("x", {**good, "target": "sm_80"})
    with pytest.raises(ValueError, match=r"fp32_tflops must be \{ value = \.\.\., source = \.\.\. \}"):
        devices._resolve("x", {**good, "fp32_tflops": 67})
