"""A trace owns its namespace: a derived trace and the one it came from never see each other's new names."""
from thunderlab.core.trace import Trace


def test_derived_traces_name_independently():
    parent = Trace("forward")
    assert parent.add_name("x") == "x"
    child = parent.derive()
    assert child.add_name("x") == "x_1"  # taken before the derive: in both
    assert child.add_name("y") == "y" and parent.add_name("z") == "z"
    # a name one of them took after the derive is still free in the other
    assert parent.add_name("y") == "y" and child.add_name("z") == "z"
    grandchild = child.derive()
    assert grandchild.add_name("w") == "w" and child.add_name("w") == "w" and parent.add_name("w") == "w"
    assert grandchild.add_name("w") == "w_1" and grandchild.add_name("y") == "y_1"
