"""The IR: proxies, symbols, bound symbols, traces, programs, printing and checking."""
