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
