"""Solve a problem file with auto and print the schedule's first ops on device 0.
    PYTHONPATH=build/python python3 examples/solve.py tests/cases/unit-4x8.json"""
import sys

import optpipe

problem = optpipe.Problem.from_file(sys.argv[1])
result = optpipe.solve(problem, method="auto", time_limit=2)
print(result.termination, result.objective, result.bound)
print("device 0:", " ".join(result.schedule.orders[0][:8]), "...")
