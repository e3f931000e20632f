"""The analysis tier: every number a report shows is computed here (summaries and statistics, the
CPU-time costs, findings under findings/, tries, the gate, regression, trend, quality). Imports
records/ and the shared base, never measure/ or report/."""
