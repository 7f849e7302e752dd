"""GPT's records: windows of contiguous tokens for the next-token LM (`create_lm_data`)."""
