"""One process's share of the kernel: calls and their waiters, signals, names, timers, mailboxes."""
