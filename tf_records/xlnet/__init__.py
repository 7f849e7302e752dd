"""XLNet's records: streams with span masking and permutation targets (`create_xlnet_data`)."""
