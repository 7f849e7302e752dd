"""ELMo's records: streams of sentences in windows, as bilm-tf reads them (`create_elmo_data`)."""
