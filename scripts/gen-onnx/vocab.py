"""WordPiece vocabulary and tokenizer files shared by every generated test model.

The tokenizer is a BERT-uncased style WordPiece tokenizer (the same normalizer,
pre-tokenizer, post-processor and decoder as bert-base-uncased) over a small,
hand-made vocabulary, so the test models stay small.
"""

import string

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = range(5)

WORDS = """
the of and to a in is it that was for on are with as he be at by this had not
but from or have an they which one you were her all she there would their we him
been has when who will more no if out so said what up its about into than them can
only other new some could time these two may then do first any my now such like our
over man me even most made after also did many before must through back years where
much your way well down should because each just those people how too little state good
very make world still own see men work long get here between both life being under never
day same another know while last might us great old year off come since against go came
right used take three states himself few house use during without again place american
around however home small found mrs thought went say part once general high upon school
every don does got united left number course war until always away something fact though
water less public put think almost hand enough far took head yet government system better
set told nothing night end why called didn eyes find going look asked later knew point
next city business give group toward young let room president side social present given
several order national possible rather second face per among form important often things
looked early white case john become large big need four within felt along children saw
best church ever least power development light thing seemed family interest want members
others mind country area done turned although open god service certain kind problem began
different door thus help sense means whole matter perhaps itself york times law human line
above name example action company hands local show whether five history gave today either
act feet across taken past quite anything having seen death experience body word half
really field car words already themselves information tell shall together college money
period held keep sure probably free real seems behind cannot miss political air question
making office brought whose special heard major problems ago became federal moment study
available known result street economic boy position reason change south board individual
job society areas west close turn love community true court force full seem am policy
age stood front common voice wife ask sometimes story cat dog sat mat movie film great
terrible awful wonderful happy sad angry bad excellent poor fine weather sunny rain cold
hot food pizza coffee tea music song game team play player sports football score win lost
weather computer phone software code data model network science research paris france
london berlin capital river mountain ocean sea tree flower garden book read write text
summary news report market price stock bank travel train plane trip hotel beach summer
winter spring autumn morning evening today tomorrow yesterday quick brown fox jumps lazy
hello world thanks please sorry yes okay
"""

SUFFIXES = ["s", "es", "ed", "ing", "er", "est", "ly", "ness", "ment", "tion", "able", "ful"]


def build_vocab():
    """Returns the token list; a token's index is its id."""
    vocab = list(SPECIALS)
    seen = set(vocab)

    def add(tok):
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)

    for ch in string.punctuation:
        add(ch)
    for ch in string.digits + string.ascii_lowercase:
        add(ch)
    for ch in string.digits + string.ascii_lowercase:
        add("##" + ch)
    for suf in SUFFIXES:
        add("##" + suf)
    for w in WORDS.split():
        add(w)
    return vocab


def tokenizer_json(vocab, max_length):
    """A tokenizer.json in the Hugging Face tokenizers format (BERT uncased style)."""
    added = [
        {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, tok in enumerate(SPECIALS)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {
            "type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
            "strip_accents": None, "lowercase": True,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [CLS], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [SEP], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {tok: i for i, tok in enumerate(vocab)},
        },
    }


def tokenizer_config(max_length):
    return {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": True,
        "model_max_length": max_length,
        "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "unk_token": "[UNK]", "mask_token": "[MASK]",
        "clean_up_tokenization_spaces": True,
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "padding_side": "right",
    }
