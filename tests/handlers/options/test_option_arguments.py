"""The see-inside options' arguments (``conv_filters``, ``embeddings``, ``grad_health`` and the
``histogram_period`` it needs) are checked when a handler is built — or, for a layer of a
``Module``'s symbol, when ``fit`` binds it — with errors that name the argument. Each test checks
several options at once, so they are here rather than in one option's file."""
import pytest

import readback

from gluon_tb.handlers import Embeddings, GradHealth, TensorBoardCallback, TensorBoardHandler
from module_setup import fit


# ------------------------------------------------------------ TensorBoardHandler
def test_option_checks_name_the_handlers_argument(tmp_path):
    """Each message names the argument the user passed (not an inner one: samples, hparam_dict)."""
    with pytest.raises(ValueError, match=r"^embeddings must be None, True, a positive sample count or an "
                                         r"Embeddings\(\.\.\.\), got -1$"):
        TensorBoardHandler("x", embeddings=-1)
    with pytest.raises(TypeError, match=r"^hparams\['lr'\] must be a str, bool, int or float, got None"):
        TensorBoardHandler("x", hparams={"lr": None})
    with pytest.raises(ValueError, match=r"^batch_period must be a positive int or None, got 0 \(None switches it off\)$"):
        TensorBoardHandler("x", batch_period=0)
    from mxnet import gluon

    from estimator_setup import loader, make_est

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4))
    net.initialize()
    with pytest.raises(ValueError, match=r"^conv_filters=True needs a Conv2D layer, and the network has none; "
                                         r"pass conv_filters=False \(or the name of a Conv2D\)$"):
        make_est(net).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path), conv_filters=True)])


def test_option_checks():
    with pytest.raises(ValueError, match="histogram_period"):
        TensorBoardHandler("x", grad_health=True, histogram_period=None)
    with pytest.raises(TypeError, match="conv_filters"):
        TensorBoardHandler("x", conv_filters=3)
    with pytest.raises(TypeError, match="embeddings"):
        TensorBoardHandler("x", embeddings="all")
    with pytest.raises(ValueError, match="stop"):
        GradHealth(stop=["sometimes"])
    with pytest.raises(TypeError, match="stop must be a bool or a collection of 'nonfinite'"):
        GradHealth(stop="nonfinite")  # one name, not a collection of names
    with pytest.raises(ValueError, match="conv_filters must be a bool or the name of a Conv2D layer, got str ''"):
        TensorBoardHandler("x", conv_filters="")
    with pytest.raises(ValueError, match="layer must be None or a block name, got str ''"):
        Embeddings(layer="")
    with pytest.raises(TypeError, match="layer must be None or a block name, got int 3"):
        Embeddings(layer=3)
    with pytest.raises(ValueError, match="tag must be a non-empty str, got str ''"):
        Embeddings(tag="")
    with pytest.raises(TypeError, match="tag must be a non-empty str, got NoneType None"):
        Embeddings(tag=None)


# ------------------------------------------------------------ TensorBoardCallback
def test_option_arguments_checked_up_front():
    with pytest.raises(TypeError, match="conv_filters must be a bool or the name"):
        TensorBoardCallback("x", conv_filters=3)
    with pytest.raises(TypeError, match="embeddings must be None, True, a sample count"):
        TensorBoardCallback("x", embeddings="all")
    with pytest.raises(TypeError, match=r"grad_health must be None, a bool or a GradHealth\(\.\.\.\)"):
        TensorBoardCallback("x", grad_health="yes")
    with pytest.raises(ValueError, match="histogram_period must not be None when grad_health"):
        TensorBoardCallback("x", grad_health=True, histogram_period=None)
    with pytest.raises(ValueError, match=r"cannot stop Module.fit.*got stop=\['exploding'\]"):
        TensorBoardCallback("x", grad_health=GradHealth(stop=["exploding"]))
    with pytest.raises(ValueError, match=r"histogram_period must be a positive int, 'epoch' or None, got 0 \(None switches it off\)"):
        TensorBoardCallback("x", histogram_period=0)
    with pytest.raises(ValueError, match="histogram_period must be a positive int, 'epoch' or None"):
        TensorBoardCallback("x", histogram_period="batch")  # a str, but not 'epoch': a wrong value
    with pytest.raises(TypeError, match="histogram_period must be a positive int, 'epoch' or None"):
        TensorBoardCallback("x", histogram_period=2.0)


def test_a_layer_that_is_not_a_convolution_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"2-D Convolution of the symbol \(conv1\), got 'fc1' \(a FullyConnected\)"):
        fit(TensorBoardCallback(str(tmp_path), conv_filters="fc1"))
    with pytest.raises(ValueError, match="^embeddings' layer 'nope' is not a layer of the symbol; its layers are conv1, relu1"):
        fit(TensorBoardCallback(str(tmp_path / "b"), embeddings=Embeddings(4, layer="nope")))



@pytest.mark.parametrize("kwargs, start", [
    ({"conv_filters": "nope"}, "conv_filters 'nope' is not a block of the network; its blocks are "),
    ({"embeddings": Embeddings(8, layer="nope")}, "embeddings' layer 'nope' is not a block of the network; "),
    ({"conv_filters": "dense0"}, "conv_filters='dense0' must name a Conv2D, got a Dense"),
])
def test_a_layer_name_the_net_lacks_names_the_option_it_came_from(tmp_path, kwargs, start):
    """Layer names are checked against the net at the start of fit (before any batch): the error says
    which option the name was given to, so two options naming layers can be told apart."""
    from estimator_setup import loader, make_est, make_net

    est = make_est(make_net())
    with pytest.raises(ValueError) as e:
        est.fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path), **kwargs)])
    assert str(e.value).startswith(start), str(e.value)


@pytest.mark.parametrize("cls", [TensorBoardHandler, TensorBoardCallback])
def test_numpy_integers_are_taken_as_their_ints(tmp_path, cls):
    """Periods and starting points computed with numpy work as the same Python ints; other types
    are still refused."""
    import numpy as np

    h = cls(str(tmp_path), batch_period=np.int64(2), histogram_period=np.int32(3), initial_epoch=np.int64(1),
            initial_step=np.uint16(5))
    assert (h._every.every, h._initial if cls is TensorBoardHandler else None) == \
        (2, (1, 5) if cls is TensorBoardHandler else None)
    assert type(h._every.every) is int
    for bad in (2.0, np.float64(2.0), np.bool_(True), True):
        with pytest.raises(TypeError, match="batch_period must be a positive int or None"):
            cls(str(tmp_path), batch_period=bad)
    with pytest.raises(ValueError, match="initial_step must be None or an int >= 0, got -1"):
        cls(str(tmp_path), initial_step=np.int64(-1))


def test_see_inside_options_take_numpy_numbers_and_refuse_values_that_cannot_work():
    import numpy as np

    g = GradHealth(vanish_checks=np.int64(3), vanish_below=np.float32(1e-7), explode_factor=np.float64(50))
    assert (g.vanish_checks, type(g.vanish_checks), g.explode_factor) == (3, int, 50.0)
    assert g.vanish_below == pytest.approx(1e-7) and type(g.vanish_below) is float
    from gluon_tb.handlers._options.embeddings import check_embeddings

    assert check_embeddings(np.int64(16)).samples == 16
    TensorBoardHandler("x", embeddings=np.int64(16), histogram_sample=np.int64(1000))  # accepted
    for kwargs, message in [({"explode_factor": 0.5}, "explode_factor must be a number above 1"),
                            ({"explode_factor": 1}, "explode_factor must be a number above 1"),
                            ({"vanish_below": float("inf")}, "vanish_below must be a finite positive number")]:
        with pytest.raises(ValueError, match=message):
            GradHealth(**kwargs)
    for kwargs in ({"vanish_checks": True}, {"vanish_below": np.bool_(True)}, {"vanish_checks": 3.0}):
        with pytest.raises(TypeError):
            GradHealth(**kwargs)
    assert Embeddings(np.int64(5)).samples == 5


def test_embeddings_data_is_checked_when_made():
    """Embeddings(data=) was taken as given and failed at the end of training (a wrong label count)
    or quietly logged nothing (a str, a 1-tuple) with a warning that said no data was given."""
    import numpy as np

    x, y = np.zeros((4, 3), np.float32), np.zeros(4, np.float32)
    for ok in (None, (x, y), [x, y], [[x, y], [x, y]]):
        Embeddings(data=ok)
    with pytest.raises(ValueError, match=r"one label per input row, got 4 input rows and 3 labels"):
        Embeddings(data=(x, y[:3]))
    with pytest.raises(ValueError, match=r"Embeddings\(data=\) must be None, an \(inputs, labels\) pair"):
        Embeddings(data=(x,))
    for bad in ("x", 5, x):
        with pytest.raises(TypeError, match=r"Embeddings\(data=\) must be None, an \(inputs, labels\) pair"):
            Embeddings(data=bad)


def test_embeddings_data_in_python_lists_is_a_pair(tmp_path):
    """Embeddings(data=([row, ...], [label, ...])) in Python lists was taken as batches and failed at
    train_begin with a bare IndexError; it is the (inputs, labels) pair as arrays, and rows of
    different lengths say so, naming the argument."""
    import numpy as np

    from estimator_setup import loader, make_est, make_net

    rows = [[[float(i)] * 8] * 8 for i in range(4)]  # 4 images of 8x8, as nested lists
    e = Embeddings(4, data=([[r] for r in rows], [0, 1, 2, 3]))
    assert [a.shape for a in e.data] == [(4, 1, 8, 8), (4,)] and e.data[0].dtype == np.float32
    with pytest.raises(ValueError, match=r"^Embeddings\(data=\(inputs, labels\)\) given as lists must hold rows "
                                         r"of one shape"):
        Embeddings(data=([[1.0, 2.0], [3.0]], [0, 1]))
    with pytest.raises(ValueError, match=r"one label per input row, got 2 input rows and 3 labels"):
        Embeddings(data=([[1.0], [2.0]], [0, 1, 2]))
    make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path), embeddings=e)])
    got = readback.projector_tensors(str(tmp_path / "train"))["embedding"]
    assert got.shape[0] == 4
