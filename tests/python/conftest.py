"""Shared fixtures: the repository's problem files, and the optpipe module from the build
tree (PYTHONPATH, set by ctest) or an installed wheel (pip install .)."""
import pathlib

import pytest

CASES = pathlib.Path(__file__).resolve().parents[1] / "cases"


@pytest.fixture
def unit():
    import optpipe
    return optpipe.Problem.from_file(CASES / "unit-4x8.json")


@pytest.fixture
def cases():
    return CASES
