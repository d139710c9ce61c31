"""Quantiles of the demand peak over the lead time: the quantity the scale decision needs.

``model.PeakQuantileForecaster(lead_steps=(1, 2), quantiles=(0.9, 0.95)).fit(frame)``
trains one global gradient-boosted quantile model per lead and quantile on every
``<pool>/demand_gpus`` series (each in its own volatility scale, with the pool's
queue depth, arrivals and utilisation as covariates); ``predict_peak(frame)`` returns
``unique_id, ds, lead, last, scale, q<level>...``. :class:`AdaptiveConformal`
calibrates each series' quantiles online from realised peaks; :func:`combine_bounds`
mixes them online with the reference bounds (trailing day; time of day:
:func:`seasonal_reference`; the peaks of the same time yesterday and last week:
:func:`seasonal_naive_reference`) and the raw quantiles by realised pinball loss.
"""
