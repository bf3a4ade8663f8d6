"""The Prometheus adapter (`bot.prom.client.PrometheusMetrics`): the `Metrics` port."""
