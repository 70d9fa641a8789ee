"""Typed configuration: schemas registered with Hydra's ConfigStore, value checks, and the conf/ path."""
