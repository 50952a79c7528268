"""The kernel, private: every module here is the kernel's own, read bottom-up.

The layers, each importing only those below it: `wire` (refs, exit reasons, the
frame codec), `transport` (a process's ZeroMQ endpoint), `net` (links between
nodes), `runtime` (a process's calls, signals, names and timers), `cell` (an
actor's thread and its gen_server loop), `host` (the processes actors live in),
`node` (the node a program holds).  `cluster` is pure policy any layer may use.
Nothing outside `actors/` imports this package, except the tests.
"""
