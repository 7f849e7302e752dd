"""XLNet's pretraining recipe and fine-tuning."""
