from helpers.tiny_models import make_family, make_model, make_tokens, tiny_tensors_on_one_thread  # noqa: F401, E501  (fixtures)
