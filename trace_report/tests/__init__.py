"""trace-report's own tests: CPU only, no torch; real traces from H200s, H100s and the world's GPUs under fixtures/."""
