from helpers.tiny_models import make_model, make_tokens, one_thread  # noqa: F401  (fixtures)
