"""`ocrbatch serve`: an HTTP service in front of one Converter, so that concurrent requests share batches.

    config.py    ServeConfig: address, limits, timeouts, token (validated once)
    guard.py     the connections: --max-connections, the header deadline, the open-file limit
    limits.py    the page slots behind --max-queue (admission in one step), the bearer token
    upload.py    the body onto disk in bounded memory: size and idle limits, the client's name made safe
    pages.py     one request's pages: submitted a window at a time, results in page order, cancelled on exit
    answer.py    one request's answer, whole or streamed; closing it frees the slots and the upload
    metrics.py   /metrics: Prometheus text from the server's counters and the Converter's stats
    app.py       the Starlette routes
    run.py       uvicorn in this process: check the engine, load it, serve, drain on SIGTERM

Everything here imports starlette/uvicorn, so only `cli.serve` imports it (lazily: `--help` stays light).
"""
