"""Replay a demand trace against scaling policies and account for GPU-hours and waiting.

:func:`simulate` is the engine (the model is in :mod:`pipelines.simulate.engine`);
policies are small objects behind the :class:`Policy` protocol: :class:`ReactivePolicy`
(cluster-autoscaler), :class:`StaticPolicy` (with :func:`smallest_static_meeting`) and
:class:`OraclePolicy` (knows the future). :func:`plot_runs` draws demand against each
policy's capacity.
"""
