"""`ocrbatch serve`: an HTTP service in front of one Converter, so that concurrent requests share batches.

    config.py    ServeConfig: address, limits, token (validated once)
    limits.py    the page slots behind --max-queue, the upload size limit, the bearer token
    pages.py     one request's pages: submitted a window at a time, results in page order, cancelled on exit
    metrics.py   /metrics: Prometheus text from the server's counters and the Converter's stats
    app.py       the Starlette routes
    run.py       uvicorn in this process: load the engine, serve, drain on SIGTERM

Everything here imports starlette/uvicorn, so only `cli.serve` imports it (lazily: `--help` stays light).
"""
