"""What the tests and benchmarks use and no command does: the bundled samples, corpora and tiny stand-in models
(samples), and the host-device synchronisation counter (host_syncs)."""
