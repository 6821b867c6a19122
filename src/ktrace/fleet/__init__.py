"""Fleet scale: per-rank work (import, analyses, export) run through one small executor interface.

`engines.open_engine` picks an engine: in-process, local worker processes, or a Dask cluster (the `ktrace[dask]`
extra; only `dask_engine` imports dask). The room sits above importers/analysis/exporters and below the CLI.
"""
