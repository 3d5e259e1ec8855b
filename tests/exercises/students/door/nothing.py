"""Defines nothing of any exercise."""


def helper(x):
    return x
