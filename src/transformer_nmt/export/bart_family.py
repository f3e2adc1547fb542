"""What transformers' BART-family configs (MarianMT, M2M-100) spell alike, read as ours."""

from typing import Any

# transformers' activation names, as TransformerConfig's `activation` names them.
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}


def stack_settings(config: Any) -> dict[str, Any]:
    """The TransformerConfig settings that transformers' BART-family configs (Marian, M2M-100)
    spell alike: depths, widths, heads, dropouts, positions and activation."""
    return dict(
        N=config.encoder_layers,
        N_dec=config.decoder_layers,
        d_model=config.d_model,
        d_ff=config.encoder_ffn_dim,
        d_ff_dec=config.decoder_ffn_dim,
        h=config.encoder_attention_heads,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        max_positions=config.max_position_embeddings,
        activation=ACTIVATIONS[config.activation_function],
    )


def head_problems(config: Any) -> list[str]:
    """What a BART-family config's heads ask that the Transformer here cannot hold."""
    problems = []
    if config.decoder_attention_heads != config.encoder_attention_heads:
        problems.append(
            f"decoder_attention_heads={config.decoder_attention_heads} differs from "
            f"encoder_attention_heads={config.encoder_attention_heads}: the stacks here share h"
        )
    if config.d_model % config.encoder_attention_heads:
        problems.append(
            f"encoder_attention_heads={config.encoder_attention_heads} does not divide "
            f"d_model={config.d_model}: heads here are d_model / h wide"
        )
    return problems
