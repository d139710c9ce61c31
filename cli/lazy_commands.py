"""Commands whose module is imported only when that command runs or shows its help.

Details: docs/layout.md, "Notes from the code", `cli/lazy_commands.py`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """A command by where its function lives, and the summary ``--help`` lists.

    Attributes:
        module: the module that defines the command's function.
        function: the function's name; its signature is the command's options. It
            may instead name a ``typer.Typer`` of sub-commands (a group).
        summary: one line for the command list; the first line of the function's
            docstring (a test checks they agree).
    """

    module: str
    function: str
    summary: str

    def load(self) -> Callable[..., Any]:
        """Import the module and return the command's function."""
        found: Callable[..., Any] = getattr(importlib.import_module(self.module), self.function)
        return found


class _Placeholder(TyperCommand):
    """Stands in for a lazy command in the command list until it is resolved."""

    def __init__(self, name: str, lazy: LazyCommand) -> None:
        super().__init__(name, help=lazy.summary, short_help=lazy.summary)
        self.lazy = lazy


class LazyCommandGroup(TyperGroup):
    """A Typer group that loads :attr:`lazy_commands` on first use.

    Subclass it with the commands as a class attribute and pass the subclass as
    ``typer.Typer(cls=...)``; commands registered on the Typer app itself come first.
    """

    lazy_commands: ClassVar[Mapping[str, LazyCommand]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, lazy in self.lazy_commands.items():
            self.commands.setdefault(name, _Placeholder(name, lazy))

    # Typer vendors click under a private module, so its Context and Command types
    # cannot be named here: ``Any`` stands for them.
    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        """Resolve as Typer does, then swap a placeholder for the real command."""
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and isinstance(command, _Placeholder):
            loaded = command.lazy.load()
            if isinstance(loaded, typer.Typer):  # a group of sub-commands
                command = typer.main.get_group(loaded)
                command.name = name
                self.commands[name] = command
            else:
                command = self.commands[name] = build_command(name, loaded)
        return name, command, rest


def build_command(name: str, function: Callable[..., Any]) -> TyperCommand:
    """Turn a Typer-annotated function into a click command named ``name``."""
    single = typer.Typer(add_completion=False)
    single.command(name)(function)
    command = typer.main.get_command(single)
    if not isinstance(command, TyperCommand):
        raise TypeError(f"{function.__qualname__} did not make a single Typer command")
    return command
