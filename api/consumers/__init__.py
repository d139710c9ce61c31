"""Consumers' formats: the priority-expander ConfigMap, capacity buffers and webhooks.

Every builder here is a pure function that validates what it returns offline and raises
:class:`~pipelines.errors.PublishError` rather than return something a consumer
would reject or misread. Writing to a cluster and delivering webhooks live elsewhere.
"""
