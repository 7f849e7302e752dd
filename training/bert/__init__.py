"""BERT's pretraining recipe: WordPiece, NSP + MLM records, the Table 5 ablations."""
