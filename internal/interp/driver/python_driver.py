# Warden's Python driver: a persistent, notebook-like interpreter.
#
# The host starts it as `python3 -u -c <this file>` with the control channel
# on descriptors 3 (requests, one JSON line each) and 4 (replies, JSON
# lines). User code's output goes to descriptors 1 and 2 at the OS level.
# After each run the driver writes the run's token to 1 and 2, then a
# "done" reply, so the host knows it has every byte of the run's output.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import sys
import traceback
import types

_DRIVER_FILE = sys._getframe().f_code.co_filename


def _undumpable():
    """Makes this process non-dumpable (prctl PR_SET_DUMPABLE 0), so other
    processes of the sandbox user cannot open /proc/<pid>/fd or ptrace it to
    reach the control pipes. Programs the code starts are dumpable again
    after exec. Without ctypes the driver runs as it is."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass


_undumpable()


def _hide(fd):
    """Moves fd to a high close-on-exec descriptor, so user subprocesses do
    not inherit it and user code does not find it at a well-known number."""
    soft = 1024
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except Exception:
        pass
    if soft < 0 or soft > 4096:
        soft = 4096
    low = max(10, soft - 64 - int.from_bytes(os.urandom(1), "little") % 32)
    try:
        import fcntl
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
    except Exception:
        new = os.dup(fd)
    if fd > 2:
        os.close(fd)
    return new


_CTL = _hide(3)
_REP = _hide(4)
_OUT = _hide(1)
_ERR = _hide(2)


def _stream(fd):
    """Returns a text stream on fd that does not close fd when user code
    closes it."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False),
                            encoding="utf-8", errors="backslashreplace",
                            write_through=True)


def _restore_stdio():
    """Undoes what user code did to descriptors 1 and 2 and to sys.stdout
    and sys.stderr, so every run starts with output going to the host."""
    os.dup2(_OUT, 1)
    os.dup2(_ERR, 2)
    for name in ("stdout", "stderr"):
        cur = getattr(sys, "__" + name + "__")
        if cur is None or cur.closed:
            cur = _stream(1 if name == "stdout" else 2)
            setattr(sys, "__" + name + "__", cur)
        setattr(sys, name, cur)


sys.__stdout__ = _stream(1)
sys.__stderr__ = _stream(2)
_restore_stdio()

_MAIN = types.ModuleType("__main__")
_MAIN.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = _MAIN
_NS = _MAIN.__dict__

_limits = {"max_output": 8 << 20, "max_value": 1 << 20}


def _write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _send(msg):
    line = json.dumps(msg, ensure_ascii=False) + "\n"
    _write_all(_REP, line.encode("utf-8", "backslashreplace"))


def _clip(text):
    limit = _limits["max_value"]
    if len(text) > limit:
        return text[:limit] + "... [%d characters cut]" % (len(text) - limit)
    return text


def _note(msg):
    try:
        sys.stderr.write("warden: " + msg + "\n")
        sys.stderr.flush()
    except Exception:
        pass


def _emit(mime, data):
    """Sends one rich output; bytes are sent as base64, text as is."""
    if isinstance(data, (bytes, bytearray)):
        data, enc = base64.b64encode(data).decode("ascii"), "base64"
    else:
        data, enc = str(data), "utf-8"
    if len(data) > _limits["max_output"]:
        _note("%s output of %d bytes dropped (limit %d)" % (mime, len(data), _limits["max_output"]))
        return
    _send({"t": "output", "mime": mime, "data": data, "enc": enc})


_REPRS = (
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("application/json", "_repr_json_"),
)


def _figure_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


_shown = set()


def _is_figure(obj):
    mod = type(obj).__module__ or ""
    return mod.startswith("matplotlib.") and hasattr(obj, "savefig")


def _rich(obj):
    """Emits every rich representation obj has, and returns how many."""
    if _is_figure(obj):
        _emit("image/png", _figure_png(obj))
        _shown.add(id(obj))
        return 1
    n = 0
    for mime, meth in _REPRS:
        fn = getattr(obj, meth, None)
        if fn is None or isinstance(obj, type):
            continue
        try:
            data = fn()
        except Exception as e:
            _note("%s of %s failed: %r" % (meth, type(obj).__name__, e))
            continue
        if isinstance(data, tuple):
            data = data[0]
        if data is None:
            continue
        if mime == "application/json" and not isinstance(data, str):
            data = json.dumps(data, default=repr)
        if mime in ("image/png", "image/jpeg") and isinstance(data, str):
            data = base64.b64decode(data)
        _emit(mime, data)
        n += 1
    return n


def display(*objs):
    """Shows each object as a notebook would: every rich representation it
    has (_repr_png_, _repr_html_, ...), or its repr as text/plain."""
    for obj in objs:
        if not _rich(obj):
            _emit("text/plain", _clip(repr(obj)))


builtins.display = display


def _figures():
    """Emits every open matplotlib figure as a PNG and closes them all;
    never imports matplotlib itself."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            if id(fig) not in _shown:
                _emit("image/png", _figure_png(fig))
    except Exception as e:
        _note("saving figures failed: %r" % (e,))
    finally:
        try:
            plt.close("all")
        except Exception:
            pass


def _exception(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _DRIVER_FILE:
        tb = tb.tb_next
    if isinstance(e, SyntaxError):
        text = "".join(traceback.format_exception_only(type(e), e))
    else:
        text = "".join(traceback.format_exception(type(e), e, tb))
    try:
        msg = str(e)
    except Exception:
        msg = "<unprintable %s>" % type(e).__name__
    return {"type": type(e).__name__, "message": _clip(msg), "traceback": _clip(text)}


_FLAGS = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
_CO_COROUTINE = 0x80


def _run_code(code, filename, mode):
    c = compile(code, filename, mode, flags=_FLAGS, dont_inherit=True)
    result = eval(c, _NS)
    if c.co_flags & _CO_COROUTINE:
        import asyncio
        result = asyncio.run(result)
    return result


def _execute(source, filename):
    """Runs one cell; returns (value, exception)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        tree = ast.parse(source, filename, "exec", type_comments=False)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        _run_code(tree, filename, "exec")
        if last is None:
            return "", None
        value = _run_code(last, filename, "eval")
    except BaseException as e:
        return "", _exception(e)
    if value is None:
        return "", None
    _NS["_"] = value
    try:
        _rich(value)
    except Exception as e:
        _note("rich output failed: %r" % (e,))
    try:
        return _clip(repr(value)), None
    except BaseException as e:
        return "", _exception(e)


def _flush():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            s.flush()
        except Exception:
            pass


def main():
    ctl = os.fdopen(_CTL, "rb")
    _send({"t": "ready"})
    count = 0
    for line in ctl:
        req = json.loads(line)
        count += 1
        for k in _limits:
            if k in req:
                _limits[k] = req[k]
        _shown.clear()
        value, exc = _execute(req["code"], "<exec-%d>" % count)
        try:
            _figures()
        except BaseException as e:
            exc = exc or _exception(e)
        _flush()
        _restore_stdio()
        token = req["token"].encode("ascii")
        _write_all(_OUT, token)
        _write_all(_ERR, token)
        _send({"t": "done", "value": value, "exc": exc})


main()
