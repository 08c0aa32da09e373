"""Regression tests of issue 10: hostile or unlucky inputs."""
