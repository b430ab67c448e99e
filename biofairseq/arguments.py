"""Command-line parsing shared by every command: argparse prints its whole usage before an error, which buries the one
thing a user needs (which flag, and what to do), so a mistake here is one line; a flag given to the wrong
sub-command is named as the other sub-command's; --help shows each flag's default. Standard library only: the error
paths must not cost an import of torch or fairseq."""

import argparse
from dataclasses import MISSING, Field, fields
from typing import Callable, NoReturn, Optional, TypeVar

_Fields = TypeVar("_Fields")


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every flag's default in --help, as transformers' HfArgumentParser shows them; flags that default to None or are
    switches say what that means in their own words instead."""

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        if action.default is None or action.nargs == 0:
            return action.help
        return super()._get_help_string(action)


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line: the flag, what is wrong, where the help is (or which
    sub-command takes a flag given to another). Sub-commands made from it are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; {self._elsewhere(message) or f'see {self.prog} --help'}\n")

    def _elsewhere(self, message: str) -> Optional[str]:
        """For unrecognised flags (argparse reports them on the top parser) that a sub-command takes: which one."""
        if not message.startswith("unrecognized arguments:"):
            return None
        flags = [word.split("=")[0] for word in message.split(":", 1)[1].split() if word.startswith("--")]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    taken = [flag for flag in flags if flag in sub._option_string_actions]
                    if taken:
                        return f"{', '.join(taken)} is a flag of '{sub.prog}' (see {sub.prog} --help)"
        return None


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= low."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: must be at least {low}")
        return value

    return parse


def first_line(error: BaseException) -> str:
    """An exception's message as a part of a one-line error (transformers' and torch's run over several lines)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# metadata keys of a field that are ours, not add_argument's
OWN_KEYS = ("flag", "group", "negated", "prediction")


def add_fields(parser: argparse.ArgumentParser, cls: type, keep: Callable[[Field], bool] = lambda field: True,
               group: Optional[str] = None, numbers: Optional[Callable[[str], tuple]] = None) -> None:
    """A flag for each field of dataclass ``cls`` that ``keep`` takes, in their order: the field's metadata holds
    add_argument's keywords, and "flag" (default --field-name; "negated": --no-field-name), "group" (an argument group
    of that title; default: ``group``). A bool's flag turns it off where it defaults on and on where it defaults off; a
    field of one type (int, float, str) parses as it, a tuple of numbers comma-separated (``numbers``: its parser);
    the default is the field's unless the metadata gives one."""
    groups = {}
    for f in fields(cls):
        if not keep(f):
            continue
        meta = {k: v for k, v in f.metadata.items() if k not in OWN_KEYS}
        name = f.name.replace("_", "-")
        flag = f.metadata.get("flag", f"--no-{name}" if f.metadata.get("negated") else f"--{name}")
        title = f.metadata.get("group", group)
        if title and title not in groups:  # (setdefault would make a new, empty group for every field)
            groups[title] = parser.add_argument_group(title)
        where = groups[title] if title else parser
        if f.type is bool and "action" not in meta:
            meta["action"] = "store_false" if f.default else "store_true"
        elif meta.get("action") not in ("store_true", "store_false"):
            if f.type is tuple and numbers is not None:
                meta.setdefault("type", numbers)
                meta.setdefault("default", ",".join(f"{v:g}" for v in f.default))
            elif f.type in (int, float, str) and "action" not in meta:
                meta.setdefault("type", f.type)
            if f.default is not MISSING:
                meta.setdefault("default", f.default)
        where.add_argument(flag, dest=f.name, **meta)


def fields_from(cls: type[_Fields], args: argparse.Namespace) -> _Fields:
    """The dataclass ``cls`` of the parsed ``args`` (as add_fields made its flags)."""
    return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
