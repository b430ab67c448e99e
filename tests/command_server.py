"""A recipe run whose commands run in this process: bash runs the recipe as a user's shell does, and each command it
starts of this environment (``$PYTHON``, biofairseq-train, biofairseq-convert, biofairseq-ner, fairseq-preprocess)
is a stand-in on PATH that hands its arguments, folder and environment to this process, which runs the command
(tests/inprocess.py) and hands back what it printed and its exit status. The recipe's wiring (its stages, flags,
files, exit statuses) is what these runs test; importing torch, fairseq and transformers once per worker instead of
once per command is most of what they cost otherwise. A command's start as a process of its own is what
tests/test_package.py, the kill tests and the two-process training runs check."""

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import inprocess

COMMANDS = ("python", "biofairseq-train", "biofairseq-convert", "biofairseq-ner", "fairseq-preprocess")
ADDRESS = "BIOFAIRSEQ_COMMAND_SERVER"  # the stand-ins' way back to this process

STAND_IN = f"""#!{sys.executable} -IS
import json, os, socket, sys
name = os.path.basename(sys.argv[0])
server = socket.socket(socket.AF_UNIX)
server.connect(os.environ["{ADDRESS}"])
server.sendall(json.dumps({{"argv": [name, *sys.argv[1:]], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode() + b"\\n")
# the length first: a process the command forked (a data loader's worker) holds this connection open after it ends
size, reply = None, b""
while size is None or len(reply) < size:
    chunk = server.recv(1 << 20)
    if not chunk:
        sys.exit("command server: the connection ended early")
    reply += chunk
    if size is None and len(reply) >= 8:
        size, reply = int.from_bytes(reply[:8], "big"), reply[8:]
reply = json.loads(reply)
sys.stdout.buffer.write(reply["stdout"].encode("utf-8", "surrogateescape"))
sys.stderr.buffer.write(reply["stderr"].encode("utf-8", "surrogateescape"))
sys.exit(reply["code"])
"""


def _receive(connection):
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return json.loads(data)


def completed(args, env, cwd=None):
    """run(args, env), its output captured: a subprocess.CompletedProcess."""
    args = [str(a) for a in args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        code = run(args, env, out, err, cwd=cwd)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(args, code, out.read(), err.read())


def script(path, *args, check=True, cwd=None):
    """A preprocess/ script of the repository as biofairseq.dev.samples.run_script runs it (this environment's tools on
    PATH), in this process: a Python script directly, a bash script with its commands served here."""
    from biofairseq.dev.samples import REPO, script_env

    if path.endswith(".py"):
        return inprocess.run("python", REPO / path, *args, check=check, cwd=cwd)
    proc = completed(["bash", REPO / path, *args], script_env(), cwd=cwd)  # run() sets PYTHON to its stand-in
    if check and proc.returncode != 0:
        raise AssertionError(f"{path} failed ({proc.returncode}):\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
    return proc


def run(args, env, stdout, stderr, cwd=None):
    """args (a bash command) run to its end with env, its commands served here; returns its exit status. stdout and
    stderr are files: a pipe nobody reads while this process serves would fill and stop bash."""
    folder = Path(tempfile.mkdtemp(prefix="bfs-commands-"))  # short: a socket's path has at most 107 bytes
    try:
        for name in COMMANDS:
            (folder / name).write_text(STAND_IN)
            (folder / name).chmod(0o755)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(folder / "socket"))
        listener.listen(4)
        env = {**env, "PATH": f"{folder}{os.pathsep}{env['PATH']}", "PYTHON": str(folder / "python"),
               ADDRESS: str(folder / "socket")}
        proc = subprocess.Popen(args, env=env, stdout=stdout, stderr=stderr, cwd=cwd)
        waiting = select.poll()  # not select.select, which fails once this process holds 1,024 descriptors
        waiting.register(listener, select.POLLIN)
        with listener:
            while proc.poll() is None:
                if waiting.poll(50):
                    connection, _ = listener.accept()
                    with connection:
                        asked = _receive(connection)
                        ran = inprocess.run(*asked["argv"], cwd=asked["cwd"], environ=asked["env"], check=False)
                        reply = {"code": ran.returncode, "stdout": ran.stdout, "stderr": ran.stderr}
                        data = json.dumps(reply).encode()
                        connection.sendall(len(data).to_bytes(8, "big") + data)
        return proc.returncode
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
