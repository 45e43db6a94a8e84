"""One spelling of an arm's trick set: the registry's "", a config's [], a frame's "baseline"."""

from grpo_lab.spec.arm import BASELINE, Arm, arm_key, arm_label


def test_every_spelling_of_the_baseline_is_one_label():
    assert arm_label("") == arm_label([]) == arm_label(None) == arm_label("baseline") == BASELINE
    assert Arm.of("tiny", "math", "").is_baseline and str(Arm.of("tiny", "math", [])) == "tiny / math / baseline"


def test_a_trick_set_keeps_its_order_in_the_label_and_not_in_the_key():
    assert arm_label(["kl_anneal", "ema_reference"]) == "kl_anneal+ema_reference"
    assert arm_key("kl_anneal+ema_reference") == arm_key(["ema_reference", "kl_anneal"]) == "ema_reference+kl_anneal"
    arm = Arm.of("m", "code", "kl_anneal+ema_reference")
    assert arm.tricks == ("kl_anneal", "ema_reference") and not arm.is_baseline and arm.key == "ema_reference+kl_anneal"
