"""`python -m bot.commands`: gpubot without its console script, as the tests and benchmarks
start it from a checkout (the interpreter they name, not whichever `gpubot` is on PATH).
Nothing but the call: every command lives in the package."""

from bot.commands import main

main()
