"""Events: subscriptions, their resources and webhook delivery."""
