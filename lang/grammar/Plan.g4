// The .plan language (docs/LANGUAGE.md). Parse tree only: the AST builder in
// lang/lib/Parser.cpp turns it into plan::ast, and sema gives it meaning.
grammar Plan;

@parser::members {
  // A unit belongs to the number before it only on the same line, and only when it
  // does not start the next entry: `batch = 32  micro = 4` is two entries, while
  // `memory = 80 GIB` is a quantity with a misspelt unit (which sema reports).
  bool unitFollows() {
    auto *next = _input->LT(1);
    auto *prev = _input->LT(-1);
    auto *after = _input->LT(2);
    if (!next || !prev || next->getType() != ID || next->getLine() != prev->getLine())
      return false;
    return !after || (after->getType() != ASSIGN && after->getType() != COLON &&
                      after->getType() != LBRACE);
  }
  // `GB/s`: only `/s` written directly after a unit, without spaces, makes a rate.
  bool perSecondFollows() {
    auto *unit = _input->LT(-1);
    auto *slash = _input->LT(1);
    auto *s = _input->LT(2);
    return unit && slash && s && slash->getType() == SLASH && s->getType() == ID &&
           s->getText() == "s" && slash->getStartIndex() == unit->getStopIndex() + 1 &&
           s->getStartIndex() == slash->getStopIndex() + 1;
  }
}

file : (importDecl | decl | SEMI)* EOF ;

importDecl : IMPORT STRING ;

decl
  : BLOCK name=ident params inputs body                          # blockDecl
  | MODEL name=ident params inputs body                          # modelDecl
  | MODEL name=ident ASSIGN expr                                 # modelAlias
  | kind=(MESH | TRAIN | RETRIEVAL | GENERATE) name=ident section # sectionDecl
  ;

params : LPAREN (param (COMMA param)* COMMA?)? RPAREN ;
param  : name=ident COLON type=ident (ASSIGN expr)? ;
inputs : LPAREN (ident (COMMA ident)* COMMA?)? RPAREN ;
body   : LBRACE stmt* RBRACE ;

stmt
  : RETURN expr SEMI?             # returnStmt
  | ident ASSIGN expr SEMI?       # assignStmt
  ;

section : LBRACE (entry (COMMA | SEMI)?)* RBRACE ;

entry
  : key=ident (ASSIGN | COLON) expr   # valueEntry
  | key=ident section                 # sectionEntry
  ;

expr
  : expr DOT ident                                   # memberExpr
  | expr LPAREN args? RPAREN                         # callExpr
  | op=(MINUS | PLUS) expr                           # unaryExpr
  | expr op=(STAR | SLASH | PERCENT) expr            # binaryExpr
  | expr op=(PLUS | MINUS) expr                      # binaryExpr
  | REPEAT LPAREN count=expr (COMMA firstKey=ident COLON first=expr)? RPAREN callee=ident (LPAREN args? RPAREN)?  # repeatExpr
  | NUMBER ({unitFollows()}? unit)?                  # numberExpr
  | STRING                                           # stringExpr
  | ident                                            # nameExpr
  | LBRACK (item (COMMA item)* COMMA?)? RBRACK       # listExpr
  | LPAREN expr RPAREN                               # parenExpr
  ;

unit : ID ({perSecondFollows()}? SLASH ID)? ;
item : (key=ident COLON)? expr ;
args : arg (COMMA arg)* COMMA? ;
arg  : (key=ident COLON)? expr ;

// Declaration keywords are contextual: `model = tiny` and `model(tiny, …)` are fine.
ident : ID | BLOCK | MODEL | MESH | TRAIN | RETRIEVAL | GENERATE ;

IMPORT    : 'import' ;
BLOCK     : 'block' ;
MODEL     : 'model' ;
MESH      : 'mesh' ;
TRAIN     : 'train' ;
RETRIEVAL : 'retrieval' ;
GENERATE  : 'generate' ;
RETURN    : 'return' ;
REPEAT    : 'repeat' ;

LPAREN : '(' ; RPAREN : ')' ; LBRACE : '{' ; RBRACE : '}' ; LBRACK : '[' ; RBRACK : ']' ;
COMMA : ',' ; COLON : ':' ; SEMI : ';' ; DOT : '.' ; ASSIGN : '=' ;
PLUS : '+' ; MINUS : '-' ; STAR : '*' ; SLASH : '/' ; PERCENT : '%' ;

ID : [A-Za-z_] [A-Za-z0-9_]* ;

// Anything that starts with a digit; the AST builder validates it, so a malformed
// number (`1.2.3`, `1__0`, `3e`) gets a precise message, and `1f1b` can be a word.
NUMBER : [0-9] NUMCHAR* ( [eE] [+-] NUMCHAR* )? ;
fragment NUMCHAR : [0-9A-Za-z_.] ;

STRING : '"' ( ~["\\\r\n] | '\\' ~[\r\n] )* '"' ;
UNTERMINATED_STRING : '"' ( ~["\\\r\n] | '\\' ~[\r\n] )* ;

LINE_COMMENT  : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS : [ \t\r\n\f]+ -> skip ;

// Every other character becomes a token so the builder can report it precisely.
STRAY : . ;
