"""BERT's records: NSP pairs (or RoBERTa's rows) with MLM masking (`create_pretraining_data`)."""
