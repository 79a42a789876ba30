"""Float reference models for tests and benchmarks (MLPerf Tiny, public CNNs, sequence models)."""
